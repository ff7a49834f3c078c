"""Where evaluations run: `local` (the harness's worker pool); `ray` arrives with the cluster issue."""
