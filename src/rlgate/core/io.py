"""Small I/O helpers shared by every reader and writer: bounded, atomic, never over an input.

Invariants: every JSON document rlgate writes carries ``schema_version``; files
are written to a temporary sibling and ``os.replace``d into place, so a crash
never leaves a half-written report; a new file's mode is ``0666`` less the umask, as
``open`` would make it; an output never lands on an input (:class:`OutputGuard`: the
inputs a command was given or read, the outputs it was asked for, one rule between them),
nor on a device, FIFO, socket or the kernel's files (``/dev``, ``/proc``, ``/sys``); a
directory is deleted only after the guard says no input lies in it (:func:`remove_tree`).
"""

from __future__ import annotations

import contextlib
import copy
import enum
import hashlib
import json
import math
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlgate.core.errors import RlgateError

SCHEMA_VERSION = 1

# --- outputs never land on inputs --------------------------------------------------------------

_KEEP_HINT = "choose an output path outside the inputs; rlgate never overwrites what you gave it"
_FILE_HINT = (
    "give the path of a regular file, or of one to create: rlgate writes an output as a new "
    "file renamed into place, never into a device, FIFO or socket, nor in /dev, /proc or /sys"
)
#: The kernel's own file systems: nothing rlgate writes belongs there.
_KERNEL_TREES = (Path("/proc"), Path("/sys"))
#: Where the system's device nodes are (``/dev/null``, ``/dev/stdout`` -> ``/proc/self/fd/1``).
_DEVICE_DIR = Path("/dev")
_FILE_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _system_place(real: Path, *, directory: bool = False) -> str | None:
    """Why ``real`` (resolved) is a system place no output may be: in /proc or /sys, or /dev's."""
    for root in _KERNEL_TREES:
        if real == root or root in real.parents:
            return f"it is in {root}, the kernel's own files"
    if real == _DEVICE_DIR or (not directory and real.parent == _DEVICE_DIR):
        return f"it is in {_DEVICE_DIR}, where the system's devices are"
    return None


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` can never be an output file (a sentence), or None: absent or a regular file.

    Each name on the way counts: the path and every symbolic link it leads through
    (``out -> /proc/self/fd/1``, ``/dev/stdout``) may not be directly in ``/dev`` nor in
    ``/proc`` or ``/sys``; what it finally names, if anything, must be a regular file (not
    a device, FIFO or socket, which a rename would replace: ``/dev/null`` as root).
    """
    here = Path(os.path.abspath(path))
    for _ in range(40):  # Linux's limit on a chain of links
        where = _real(here.parent) / here.name
        why = _system_place(where)
        if why is not None:
            return why
        if not where.is_symlink():
            break
        try:
            here = Path(os.path.abspath(where.parent / os.readlink(where)))
        except OSError:
            break
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # nothing there yet (or a dangling link, replaced): a new file
    if stat.S_ISREG(mode):
        return None
    return f"it is {_FILE_KINDS.get(stat.S_IFMT(mode), 'a special file')}, not a regular file"


def refuse_special_output(path: str | os.PathLike[str], flag: str = "") -> None:
    """Refuse an output path that names a device, FIFO, socket or the kernel's files (exit 2)."""
    why = _not_a_file(Path(path))
    if why is not None:
        raise RlgateError(f"refusing to write {_named(flag, path)}: {why}", hint=_FILE_HINT)


def _real(path: Path) -> Path:
    """``path`` with ``..`` and every symbolic link resolved (a link loop: as written)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on Python 3.11
        return Path(os.path.abspath(path))


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a regular file: two names of one file share it (a hard link)."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


def _links(path: Path) -> int:
    try:
        return path.stat().st_nlink
    except (OSError, ValueError):
        return 0


def _holds(tree: Path, identity: tuple[int, int]) -> bool:
    """Whether a file under ``tree`` is the file ``identity`` names (a hard link into it).

    Only asked for an output with more than one name, so the walk is rare; it reads the
    directory entries' inode numbers (no stat but on a match) and follows no link.
    """
    device, inode = identity
    stack = [tree]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.inode() == inode and entry.is_file(follow_symlinks=False):
                        if entry.stat(follow_symlinks=False).st_dev == device:
                            return True
        except OSError:
            continue
    return False


@dataclass(frozen=True, slots=True)
class _Input:
    shown: str  # as given or read
    what: str  # "--recipe", "run manifest", "defaults chain of child.yaml", ...
    real: Path
    identity: tuple[int, int] | None
    tree: bool  # a directory: nothing may be written inside it

    @property
    def label(self) -> str:
        return f"{self.what}: {self.shown}" if self.what else self.shown


@dataclass(frozen=True, slots=True)
class _Output:
    flag: str
    path: Path
    real: Path
    directory: bool  # the command writes files inside it


def _named(flag: str, path: str | os.PathLike[str]) -> str:
    return f"{flag} {os.fspath(path)}" if flag else os.fspath(path)


class Role(enum.Enum):
    """What a path option names, for the output guard (the CLI's and the pytest plugin's)."""

    FILE_OUT = "an output file"
    DIR_OUT = "an output directory: the command writes files inside it"
    PATH = "an input file or directory (a directory: nothing is written inside it)"
    RUN = "a run directory from rlgate launch, or its manifest: the run directory is an input"
    RECIPE = "a config file and every file of its defaults: chain (or a recipe's name)"
    CONFIGS = "configs and overrides (recipe check): each config as RECIPE"
    PAIRS = "MODEL=PATH items: each PATH as PATH"
    CHECKOUT = "a source checkout: the folder itself is an input, not what lies inside it"
    ROOT = "a folder of input folders (the tokenizer root): each subfolder is an input"
    DB = "the history database: an input from when cli.history.open_db opens it"
    PYTEST = "arguments handed to pytest, which checks its own options"
    NAME = "not a path here (a recipe name, a date)"

    @property
    def output(self) -> bool:
        """Names something the command writes."""
        return self in (Role.FILE_OUT, Role.DIR_OUT)

    @property
    def path(self) -> bool:
        """Names a file system path (an input or an output)."""
        return self not in (Role.PYTEST, Role.NAME)


#: A config's ``defaults:`` chain, parents first and the config last
#: (``rlgate.recipe.load.config_files``, which ``core`` cannot import).
Chain = Callable[[str], Sequence[str | os.PathLike[str]]]


class OutputGuard:
    """The inputs of one command (given or read) and the outputs it was asked to write.

    One rule, whichever side is known first: an output file may not be an input (the same
    resolved path: ``..``, a symbolic link, a linked folder), a hard link to one, nor lie
    inside an input directory (a run directory, SWE results, a tokenizer root: nothing is
    written inside it); an output directory may not be an input nor lie inside one (an
    input inside it is refused where a write would land on it). Two outputs may not be the
    same file.

    Inputs join through :meth:`add_input`: the command line's when the command starts
    (``rlgate.cli.outputs``, ``check=True``: refused at once), and everything read through
    this module's readers while the guard is active (:func:`note_input`), such as a
    recipe's ``defaults:`` chain or a run manifest. Writers consult :meth:`check_write`
    for a path that is (or is inside) a declared output. What the command wrote itself is
    not an input when read back (``launch --watch`` updating its own manifest).
    """

    def __init__(self) -> None:
        self._files: dict[Path, _Input] = {}
        self._identities: dict[tuple[int, int], _Input] = {}
        self._trees: dict[Path, _Input] = {}
        self._outputs: list[_Output] = []
        self._written: set[Path] = set()

    # -- inputs --

    def add_input(
        self,
        path: str | os.PathLike[str],
        what: str,
        *,
        tree: bool | None = None,
        check: bool = False,
    ) -> None:
        """Record an input (``tree``: a directory; default: whether it is one now).

        With ``check``, a declared output that conflicts with it is refused at once.
        """
        given = Path(path)
        real = _real(given)
        if real in self._written:
            return
        is_tree = given.is_dir() if tree is None else tree
        item = _Input(os.fspath(path), what, real, None if is_tree else _identity(given), is_tree)
        table = self._trees if is_tree else self._files
        if check or real not in table:  # the command line's name wins over a reader's
            table[real] = item
            if item.identity is not None:
                self._identities[item.identity] = item
        if check:
            for out in self._outputs:
                self._refuse(out.flag, out.path, directory=out.directory)

    def add_option(
        self, role: Role, flag: str, values: Iterable[Any], *, chain: Chain | None = None
    ) -> None:
        """Add the inputs one option names, as ``role`` says, refused at once against the outputs.

        ``RECIPE``: the config and every file of its ``defaults:`` chain (``chain``);
        ``ROOT``: each subfolder is an input directory, the root itself an input;
        ``CHECKOUT``: the folder only; ``PAIRS``: the path after ``MODEL=``; ``RUN``: the run
        directory (a manifest file's folder: the manifest may only describe the directory it
        is in) and everything in it. Outputs, ``DB`` (an input when opened), ``CONFIGS``
        (split by the CLI first) and non-paths add nothing here.
        """
        if role.output or not role.path or role in (Role.DB, Role.CONFIGS):
            return
        for value in values:
            if role is Role.PAIRS:
                value = str(value).partition("=")[2] or value
            given = Path(value)
            if role is Role.RECIPE:
                if chain is None:
                    raise ValueError("a RECIPE option needs the defaults chain resolver")
                *parents, _ = chain(str(value)) or [given]
                for parent in parents:
                    self.add_input(parent, f"defaults chain of {value}", check=True)
            elif role is Role.ROOT:
                with contextlib.suppress(OSError):
                    for sub in sorted(p for p in given.iterdir() if p.is_dir()):
                        self.add_input(sub, f"a tokenizer of {flag}", tree=True, check=True)
            elif role is Role.RUN and given.is_file():
                self.add_input(given.parent, f"the run directory of {flag}", tree=True, check=True)
            tree = False if role in (Role.ROOT, Role.CHECKOUT) else None
            self.add_input(value, flag, tree=tree, check=True)

    def conflict(self, path: str | os.PathLike[str], *, directory: bool = False) -> str | None:
        """Why writing ``path`` would harm an input (a sentence), or None."""
        out = Path(path)
        real = _real(out)
        hit = self._files.get(real) or self._trees.get(real)
        if hit is not None:
            how = (
                "a symbolic link to one of the inputs" if out.is_symlink() else "one of the inputs"
            )
            return f"it is {how} ({hit.label})"
        for folder in real.parents:
            hit = self._trees.get(folder)
            if hit is not None:
                what = f" ({hit.what})" if hit.what else ""
                return f"it is inside the input directory {hit.shown}{what}"
        identity = None if directory else _identity(out)
        hit = self._identities.get(identity) if identity is not None else None
        if hit is None and identity is not None and _links(out) > 1:
            hit = next((t for t in self._trees.values() if _holds(t.real, identity)), None)
        if hit is not None:
            return f"it is a hard link to one of the inputs ({hit.label})"
        return None

    def input_within(self, folder: str | os.PathLike[str]) -> str | None:
        """An input at or under ``folder`` (as shown), or None."""
        root = _real(Path(folder))
        for item in (*self._files.values(), *self._trees.values()):
            if item.real == root or root in item.real.parents:
                return item.label
        return None

    def _refuse(self, flag: str, path: str | os.PathLike[str], *, directory: bool) -> None:
        why = self.conflict(path, directory=directory)
        if why is not None:
            raise RlgateError(f"refusing to write {_named(flag, path)}: {why}", hint=_KEEP_HINT)

    # -- outputs --

    def add_output(
        self, path: str | os.PathLike[str], flag: str = "", *, directory: bool = False
    ) -> None:
        """Declare an output the user asked for; refuse it now if it cannot be written.

        A file output may not be a directory nor sit under a file; a directory output may
        not be a file; neither may be an input, or the same as another output.
        """
        out = Path(path)
        _check_shape(out, flag, directory=directory)
        real = _real(out)
        for other in self._outputs:
            if other.real == real:
                raise RlgateError(
                    f"{other.flag or other.path} and {flag or out} name the same file ({out}); "
                    "one would overwrite the other",
                    hint="give each output its own path",
                )
        self._refuse(flag, out, directory=directory)
        self._outputs.append(_Output(flag, out, real, directory))

    def _covering(self, path: Path) -> _Output | None:
        real = _real(path)
        for out in self._outputs:
            if real == out.real or (out.directory and out.real in real.parents):
                return out
        return None

    def check_write(self, path: str | os.PathLike[str]) -> None:
        """Refuse writing ``path`` when it is (or is inside) a declared output and hits an input.

        Writes elsewhere are rlgate's own records (a run manifest ``watch`` updates, logs
        it fetched), checked only against the inputs their writer names.
        """
        out = self._covering(Path(path))
        if out is not None:
            self._refuse(out.flag if out.real == _real(Path(path)) else "", path, directory=False)

    def wrote(self, path: str | os.PathLike[str]) -> None:
        """Record a file this command wrote: read back later, it is not an input."""
        self._written.add(_real(Path(path)))


_GUARD: ContextVar[OutputGuard | None] = ContextVar("rlgate_output_guard", default=None)


@contextlib.contextmanager
def output_guard(guard: OutputGuard | None = None) -> Iterator[OutputGuard]:
    """Make ``guard`` (default: a fresh one) the current :class:`OutputGuard` while inside.

    One per command (the CLI's, or the pytest plugin's for its session's writes).
    """
    guard = OutputGuard() if guard is None else guard
    token = _GUARD.set(guard)
    try:
        yield guard
    finally:
        _GUARD.reset(token)


def note_input(
    path: str | os.PathLike[str], what: str, *, tree: bool | None = None, check: bool = False
) -> None:
    """Tell the active guard (if any) that ``path`` is an input (:meth:`OutputGuard.add_input`)."""
    guard = _GUARD.get()
    if guard is not None:
        guard.add_input(path, what, tree=tree, check=check)


def _check_shape(path: Path, flag: str = "", *, directory: bool = False) -> None:
    """Refuse an output path that can never be written as asked (naming its option)."""
    name = _named(flag, path)
    if directory:
        if path.exists() and not path.is_dir():
            raise RlgateError(f"{name} exists and is not a directory")
        why = _system_place(_real(path), directory=True)
        if why is not None:
            raise RlgateError(f"refusing to write {name}: {why}", hint=_FILE_HINT)
        return
    if path.is_dir():
        raise RlgateError(f"{name} is a directory", hint="give the path of a file")
    parent = Path(os.path.abspath(path)).parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise RlgateError(f"{name}: {parent} is not a directory")
    refuse_special_output(path, flag)


def _explicit(inputs: Iterable[str | os.PathLike[str]]) -> OutputGuard:
    guard = OutputGuard()
    for item in inputs:
        guard.add_input(item, "")
    return guard


def check_output(
    path: str | os.PathLike[str],
    *,
    flag: str = "",
    directory: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Refuse an output the user asked for that would harm ``inputs`` or the command's inputs.

    The same rule as :class:`OutputGuard`, against ``inputs`` (a directory among them is a
    tree) and every input of the active guard.
    """
    why = output_conflict(path, directory=directory, inputs=inputs)
    if why is not None:
        raise RlgateError(f"refusing to write {_named(flag, path)}: {why}", hint=_KEEP_HINT)


def output_conflict(
    path: str | os.PathLike[str],
    *,
    directory: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> str | None:
    """Why writing ``path`` would harm one of ``inputs`` or of the active guard, or None."""
    for guard in (_explicit(inputs), _GUARD.get()):
        why = guard.conflict(path, directory=directory) if guard is not None else None
        if why is not None:
            return why
    return None


def input_within(
    folder: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """An input of ``inputs`` or of the active guard at or under ``folder``, or None."""
    for guard in (_explicit(inputs), _GUARD.get()):
        found = guard.input_within(folder) if guard is not None else None
        if found is not None:
            return found
    return None


def remove_tree(
    path: str | os.PathLike[str],
    *,
    what: str,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Delete the directory ``path`` (``what`` it is, for the message) that rlgate made.

    Refused (exit 2, nothing deleted) when ``path`` is a symbolic link, is or lies inside an
    input, or holds one: an input of ``inputs`` or of the active guard at or under it (a
    tokenizer root given inside an earlier demo's folder). Every directory rlgate deletes
    goes through here.
    """
    folder = Path(path)
    if folder.is_symlink():
        raise RlgateError(
            f"refusing to delete {what} {folder}: it is a symbolic link",
            hint="remove the link yourself; rlgate never deletes through a link",
        )
    why = output_conflict(folder, directory=True, inputs=inputs)
    held = input_within(folder, inputs)
    if why is not None or held is not None:
        reason = why or f"it holds the input {held}"
        raise RlgateError(
            f"refusing to delete {what} {folder}: {reason}",
            hint="move that input out of it, or choose another output folder; rlgate never "
            "deletes what you gave it",
        )
    shutil.rmtree(folder)


def _guard_write(out: Path, inputs: Iterable[str | os.PathLike[str]]) -> None:
    _explicit(inputs)._refuse("", out, directory=False)
    guard = _GUARD.get()
    if guard is not None:
        guard.check_write(out)


def _new_sibling(out: Path) -> tuple[int, Path]:
    """Create a new, empty, hidden file beside ``out``: its descriptor and path.

    Its mode is ``0666`` less the process's umask (and the folder's default ACL), as
    ``open(out, "w")`` would create ``out`` itself; ``mkstemp``'s ``0600`` would make
    every report unreadable to the team on shared storage.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = out.parent / f".{out.name}.{secrets.token_hex(6)}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def write_bytes_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``data`` to ``path`` atomically, never over, through or inside an input.

    ``inputs`` are refused as :class:`OutputGuard` refuses them (a directory among them is
    a tree), and so is every input of the active guard when ``path`` is a declared output;
    so is a path that names a device, FIFO or socket, or lies in ``/dev``, ``/proc`` or
    ``/sys`` (:func:`refuse_special_output`). The file is new (mode ``0666`` less the
    umask; a file it replaces keeps neither its mode nor its owner) and renamed into place.
    """
    out = Path(path)
    _guard_write(out, inputs)
    if out.is_dir():
        raise RlgateError(
            f"cannot write {out}: it is a directory", hint="give a file path for this output"
        )
    refuse_special_output(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_sibling(out)
    except OSError as exc:
        raise RlgateError(f"cannot write {out}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)  # replaces a symlink at ``out`` itself, never its target
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RlgateError(f"cannot write {out}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    guard = _GUARD.get()
    if guard is not None:
        guard.wrote(out)
    return out


def write_text_atomic(
    path: str | os.PathLike[str],
    text: str,
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, refusing to overwrite any of ``inputs``."""
    return write_bytes_atomic(path, text.encode("utf-8"), inputs=inputs)


def write_json_atomic(
    path: str | os.PathLike[str],
    payload: dict[str, Any],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``payload`` (plus ``schema_version``) as indented, strict JSON, atomically.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"``: a NaN loss is
    shown, not dropped, and the file stays valid for strict JSON parsers (no bare ``NaN``).
    """
    doc = {"schema_version": SCHEMA_VERSION, **payload}
    text = json.dumps(_finite(doc), indent=2, sort_keys=False, default=str, allow_nan=False)
    return write_text_atomic(path, text + "\n", inputs=inputs)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its string form."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# A NeMo RL config expands to a few thousand nodes; a YAML alias bomb ("billion laughs")
# is a few hundred bytes that expand to billions. Aliases are fine below this budget.
MAX_YAML_NODES = 200_000


#: libyaml's parser where PyYAML was built with it (the wheels are), else PyYAML's own
try:
    from yaml.cyaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    CParser = None


class BudgetMixin:
    """Refuses a document whose alias-expanded size exceeds ``MAX_YAML_NODES``.

    Mixed in before a loader (PyYAML's or libyaml's parser): the whole document is composed
    into nodes, sized with every alias expanded, and only then constructed.
    """

    def get_single_node(self) -> yaml.Node | None:
        """The document's root node, refused when its aliases expand it past the budget."""
        node = super().get_single_node()  # type: ignore[misc]
        if node is not None and _expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise yaml.YAMLError(
                f"the document expands to more than {MAX_YAML_NODES:,} nodes through its "
                "aliases (&anchor/*alias); refusing it as an alias bomb"
            )
        return node


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A parser's error on one line: ``found duplicate key b (line 3, column 3)``."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"{exc.problem}{where}".replace(
            "exceeded maximum nesting depth", "nested too deeply"
        )
    return " ".join(str(exc).split())


def budget_loader(loader: type) -> type:
    """``loader`` (a ``SafeLoader`` subclass) with the alias budget, parsed by libyaml if any.

    Construction and resolution (tags, implicit types, duplicate-key rules) stay
    ``loader``'s own; only the scanner/parser/composer is libyaml's C code.
    """
    if CParser is None:
        return type(f"Budget{loader.__name__}", (BudgetMixin, loader), {})

    def __init__(self: Any, stream: Any) -> None:
        CParser.__init__(self, stream)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)

    return type(f"CBudget{loader.__name__}", (BudgetMixin, CParser, loader), {"__init__": __init__})


_BudgetLoader = budget_loader(yaml.SafeLoader)


def _expanded_size(root: yaml.Node, budget: int) -> int:
    """Node count with every alias expanded, computed over distinct nodes (memoised).

    An alias to one of its own ancestors (``a: &a [*a]``) expands without end: over budget.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the path from the root: seeing one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not children_done:
            if id(node) in open_nodes:
                return budget + 1
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        open_nodes.discard(id(node))
        sizes[id(node)] = min(budget + 1, 1 + sum(sizes.get(id(c), 0) for c in children))
    return sizes[id(root)]


def require_regular_file(path: Path, what: str, limit: int) -> None:
    """Refuse what is not a regular file of at most ``limit`` bytes (exit 2, naming it).

    A directory, a missing path, a FIFO or device (which would block or never end) and a
    file over ``limit`` are each one clear error. The file joins the active output guard's
    inputs (:func:`note_input`).
    """
    note_input(path, what)
    if not path.is_file():
        kind = "is a directory" if path.is_dir() else "not found"
        if path.exists() and not path.is_dir():
            kind = "is not a regular file"
        raise RlgateError(f"{what} {kind}: {path}")
    size = path.stat().st_size
    if size > limit:
        raise RlgateError(
            f"{what} {path} is {size / 2**20:.0f} MiB; rlgate reads at most "
            f"{limit // 2**20} MiB of it",
            hint="is this the right file? a tier's JUnit or an rlgate JSON is a few MB",
        )


def read_text(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
    errors: str = "strict",
) -> str:
    """Read a text file the user gave: a missing, unreadable or non-UTF-8 file is ``error``.

    The file joins the active output guard's inputs (:func:`note_input`), as ``what``.

    Args:
        path: the file.
        what: what the file is, for messages ("nightly list", "site config").
        error: the ``RlgateError`` subclass to raise.
        hint: what to do, attached to the error.
        errors: ``"strict"`` (default: refuse bytes that are not UTF-8) or ``"replace"``
            for logs, where a crashed writer may leave a torn multi-byte character.
    """
    file = Path(path)
    note_input(file, what)
    if not file.is_file():
        kind = "a directory, not a file" if file.is_dir() else "not found"
        raise error(f"{what} {kind}: {file}", hint=hint)
    try:
        return file.read_bytes().decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise error(
            f"{file}: {what} is not UTF-8 text (byte {exc.start}: {exc.reason})", hint=hint
        ) from exc
    except OSError as exc:
        raise error(f"cannot read {what} {file}: {exc.strerror or exc}", hint=hint) from exc


def read_yaml(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
) -> Any:
    """Parse a YAML file the user gave, with one kind of error for missing and invalid files.

    The loader is safe (no ``!!python`` tags) and refuses alias bombs (``MAX_YAML_NODES``).

    Args:
        path: the file.
        what: what the file is, for messages ("nightly list", "site config").
        error: the ``RlgateError`` subclass to raise.
        hint: what to do, attached to the error.
    """
    file = Path(path)
    text = read_text(file, what=what, error=error, hint=hint)
    key = hashlib.sha256(text.encode("utf-8")).digest()
    if key in _PARSED:
        return copy.deepcopy(_PARSED[key])
    try:
        value = yaml.load(text, Loader=_BudgetLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else yaml_problem(exc)
        raise error(f"{file}: not valid YAML: {detail}", hint=hint) from exc
    memoise(_PARSED, key, copy.deepcopy(value), len(text))
    return value


#: Parsed documents by the SHA-256 of their text (:func:`read_yaml`): the functional tier and
#: ``recipe check`` read the same recipe chain and Gym configs dozens of times per process.
#: Only successful parses are kept (an invalid text is refused every time); callers get a copy.
_PARSED: dict[bytes, Any] = {}
MEMO_ENTRIES = 256
MEMO_TEXT_BYTES = 1 << 20  # a larger text is parsed every time


def memoise(memo: dict[bytes, Any], key: bytes, value: Any, size: int) -> None:
    """Keep ``value`` under ``key`` if the text is small, dropping the oldest entry when full."""
    if size > MEMO_TEXT_BYTES:
        return
    if len(memo) >= MEMO_ENTRIES:
        memo.pop(next(iter(memo)))
    memo[key] = value


def json_number(value: Any) -> float | None:
    """A parsed JSON number as a float (NaN/inf kept, for a check to name); else None.

    ``bool`` is not a number here; an integer literal beyond float range is +/-inf.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def read_json(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
) -> Any:
    """Parse a JSON file the user gave; missing, non-UTF-8 or invalid JSON is ``error``.

    ``NaN``/``Infinity`` literals are accepted (Python writers emit them); callers that
    need finite numbers check them.
    """
    file = Path(path)
    text = read_text(file, what=what, error=error, hint=hint)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise error(f"{file}: {what} is not valid JSON: {detail}", hint=hint) from exc
