"""The review layer (torch-free): check logs and trees, score and compare results, diagnose runs."""
