"""Code that runs inside the sandbox: the fork server, its children, the jobs, the measure coordinator and its timed processes. Imports protocol and containment, never driver or gates."""
