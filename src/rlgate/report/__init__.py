"""The go/no-go release report: inputs, verdict, story, rendering, plots."""
