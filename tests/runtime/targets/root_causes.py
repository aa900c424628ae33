"""Hazards with one root each: one Python value reaching several ops, a path only the first step
takes, a tensor made from the same Python data every step, and host tensors moved to the device."""
import torch

from _base import StaticStep


class OneValue(StaticStep):
    """A per-step Python value used by three ops: one frozen-scalar record, two symptoms."""

    def prepare(self, step: int):
        super().prepare(step)
        self.scale = float(step + 2)

    def step(self):
        scaled = self.x * self.scale  # PLANTED: first use
        shifted = scaled + self.scale
        self.out.copy_(shifted.clamp(max=self.scale))
        return self.out


class FirstCall(StaticStep):
    """A lazy first-call path: only step 0 runs the branch (later steps agree with each other)."""

    def reset(self):
        super().reset()
        self.warm = False

    def step(self):
        if not self.warm:  # PLANTED: branch
            self.state.copy_(self.x * 2)
            self.state.add_(1.0)
            self.warm = True
        self.out.copy_(self.x + self.state)
        return self.out


def _full_update(state, x):
    state.copy_(x * 2)
    state.add_(1.0)


def _one_token_update(state, x):
    state.mul_(0.5)
    state.add_(x)


class HelperChoice(StaticStep):
    """A first-step path that picks one of two helpers (a hybrid layer's full conv before its
    one-token update): the ops part inside the helpers, the choice is the caller's `if`."""

    def reset(self):
        super().reset()
        self.warm = False

    def step(self):
        if not self.warm:  # PLANTED: helper branch
            _full_update(self.state, self.x)
            self.warm = True
        else:
            _one_token_update(self.state, self.x)
        self.out.copy_(self.x + self.state)
        return self.out


class ConstantIndex(StaticStep):
    """An index built from the same Python data every step: a copy from the host, never stale."""

    def step(self):
        index = torch.tensor([self.size - 1], device=self.device)  # PLANTED: constant
        self.out.copy_(self.x)
        self.out.index_fill_(0, index, 0.0)
        return self.out


class HostCopy(StaticStep):
    """A ramp made on the host inside the step, then moved to the device: a host-to-device copy."""

    def step(self):
        ramp = torch.arange(self.size).float() / self.size
        self.out.copy_(self.x * ramp.to(self.x.device))  # PLANTED: move
        return self.out


class DeviceRamp(StaticStep):
    """VALID: the same ramp made on the device, and a weight moved to its own device (no copy)."""

    def step(self):
        ramp = torch.arange(self.size, device=self.device).float() / self.size
        self.out.copy_((self.x * ramp.to(self.x.device)) @ self.w.to(self.x.device))
        return self.out


class HostBranch(StaticStep):
    """VALID: a branch on a host tensor made in the step (as torch.distributions checks its
    parameters): reading a host value is no device sync."""

    def step(self):
        threshold = torch.tensor(0.5)
        if bool((threshold > 0).all()):  # PLANTED: host branch
            self.out.copy_(self.x * 2)
        return self.out


def make(device, kind: str = "one_value"):
    classes = {"one_value": OneValue, "first_call": FirstCall, "helper_choice": HelperChoice,
               "constant_index": ConstantIndex,
               "host_copy": HostCopy, "device_ramp": DeviceRamp, "host_branch": HostBranch}
    return classes[kind](device)
