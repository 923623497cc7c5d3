"""MLPerf Power capture during our own runs (the system descriptor's `power:` block,
harness/resolve/power.py):

    sampler.py   one node's sampler process: a reading per interval on absolute deadlines,
                 stamped with the host clock MLLOG uses, appended to a raw stream in the run folder
    capture.py   starts the samplers before the run (refusing in one line when a BMC cannot be
                 read), stops them by pid in every exit path, says which one died and when
    files.py     power/result_<k>/node_<i>.txt and sw_<j>.txt, written atomically next to the
                 claimed result through the one MLLOG writer

What the official package checker does not check is linted by harness/review/check/power.py;
energy is scored by harness/review/results/energy.py.
"""
