"""Shared test configuration: Hypothesis profiles.

Select one with HYPOTHESIS_PROFILE=thorough or pytest's --hypothesis-profile=thorough.
"""

import os

from hypothesis import settings

settings.register_profile("default", max_examples=30, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
