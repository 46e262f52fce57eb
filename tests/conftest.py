"""Shared test configuration: Hypothesis profiles.

Select one with HYPOTHESIS_PROFILE=extended (100 examples) or thorough (1000), or pytest's
--hypothesis-profile=...
"""

import os

from hypothesis import settings

settings.register_profile("default", max_examples=30, deadline=None)
settings.register_profile("extended", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
