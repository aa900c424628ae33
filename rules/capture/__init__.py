"""GL5xx: capture and replay hygiene. The family's rules live in modules by what they look at;
this package gathers them into the family's RULES (the order of `graphlint rules`), for the registry."""
# - rules/capture/streams.py (GL501-GL504) and rules/capture/replay.py (GL505, GL510) judge the
#   code that captures and replays a graph (explicit per-device streams, no `set_device` in their
#   place, no global synchronize between replays, a warm-up before capture). That code is host
#   code by design, so these rules set `applies_in_host_code` and the engine keeps their findings
#   in every region, `host` and `unreached` included;
# - rules/capture/copies.py (GL506, GL507), frozen_scalar.py (GL508), host_random.py (GL509)
#   and per_step_branch.py (GL511) judge the step itself (cross-device copies, per-step Python
#   scalars and host randomness or clocks frozen into the capture; per_step.py says which values
#   are per-step). They set `capture_only`.
#
# GL505 (a global synchronize between replays) and GL106 (synchronize in per-step code) see the
# same call. The split is by region: GL106 reports it in `captured` and `eager` functions, GL505
# (`host_code_only`) in `host` and `unreached` ones, so one call is reported once.
from __future__ import annotations

from .copies import CrossDeviceCopy, FollowDeviceCopy
from .frozen_scalar import FrozenScalar
from .host_random import HostRandomOrClock
from .per_step import PER_STEP_NAMES
from .per_step_branch import PerStepBranch
from .replay import CaptureWithoutWarmup, SynchronizeAroundReplay
from .streams import GraphWithoutStream, ReplayOutsideStream, SetDeviceForCapture, StreamWithoutDevice

RULES = [GraphWithoutStream, StreamWithoutDevice, ReplayOutsideStream, SetDeviceForCapture, SynchronizeAroundReplay,
         CrossDeviceCopy, FollowDeviceCopy, FrozenScalar, HostRandomOrClock, CaptureWithoutWarmup, PerStepBranch]

__all__ = ["RULES", "PER_STEP_NAMES"]
