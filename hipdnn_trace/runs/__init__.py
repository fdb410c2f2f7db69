"""One ``run``, as the command line and the Python API both drive it.

``request.RunRequest`` (every option, typed, with its default) -> ``plan.plan_run`` (every decision and
every refusal, before any work or run folder) -> ``measure.measure`` (the suite loop, writing the run
folder through results/). ``commands/run.py`` builds the request from argparse, ``api.run`` from
keyword arguments; neither holds any of the steps.
"""
