"""The armd command line and, later, the long-running control loop."""
