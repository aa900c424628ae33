"""A target that breaks the harness's process in the way `how` names: the harness must survive it."""
import ctypes
import os
import sys
import threading
import time

import torch

from _base import StaticStep


def _linger():
    time.sleep(600)


class Misbehave(StaticStep):
    def __init__(self, device, how: str):
        super().__init__(device)
        self.how = how

    def reset(self):
        super().reset()
        if self.how == "raise_in_reset":
            raise RuntimeError("reset failed")  # PLANTED: reset

    def prepare(self, step: int):
        super().prepare(step)
        if self.how == "raise_in_prepare" and step == 2:
            raise KeyError("no input for step 2")  # PLANTED: prepare

    def step(self):
        print("a print from the step")  # never part of the JSON report on stdout
        how = self.how
        if how == "raise_in_step":
            raise ValueError("bad step")  # PLANTED: step
        if how == "sys_exit":
            sys.exit(3)  # PLANTED: sys_exit
        if how == "os_exit":
            os._exit(4)  # PLANTED: os_exit
        if how == "segfault":
            ctypes.string_at(0)  # PLANTED: segfault
        if how == "hang":
            while True: pass  # noqa: E701  # PLANTED: hang (one line: its stack has one line number)
        if how == "thread" and not hasattr(self, "thread"):
            self.thread = threading.Thread(target=_linger, name="lingering")  # PLANTED: thread
            self.thread.start()
        self.out.copy_(torch.tanh(self.x @ self.w))
        if how == "return_none":
            return None
        if how == "return_int":
            return 3
        if how == "return_dict":
            return {"loss": 1.0}
        return self.out


class NoDevice:
    def reset(self):
        pass

    def prepare(self, step):
        pass

    def step(self):
        return torch.zeros(1)


def make(device, how: str = "ok"):
    return Misbehave(device, how)


def make_without_device(device):
    return NoDevice()


def make_exiting(device):
    return Misbehave(device, "sys_exit")
