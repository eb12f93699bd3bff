"""The run engine: the runner process, its schedule, one trial's lifecycle, the context the
trials of a run share, the live feed and the control socket clients attach to.

Nothing is imported here, so ``core.run.placement`` (which sandboxes describe their hosts
with) loads without the engine.
"""
