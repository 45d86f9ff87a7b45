"""Decisions of the runtime checker. The hook modules only record events; these modules
turn them into findings at three moments: before each backward (``at_backward``), when an
optimizer window closes (``window_checks``) and at the end of the run (``finalize``)."""
