"""The bottom layer: what every other layer shares and nothing here imports from above.

errors (exit codes), schema (strict YAML models), layout + runplan (the RunPlan data that crosses
into a training process), mllog / mllog_reader (the one MLLOG writer and the one reader), files
(atomic writes), tree (submission-tree paths), runfolder (a run folder's files), checkpoint_manifest
(torch-free checkpoint verification), spec (what a reference implementation exposes).
Never imports torch, never prints.
"""
