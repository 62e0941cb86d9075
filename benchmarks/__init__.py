"""
The project's studies (issue 43): one folder per study, with its grid configs, its probes, its write-up and its
results. ``python -m benchmarks`` lists them; :mod:`benchmarks.study` declares the probes.
"""
