"""A step that kills its process (as a sticky CUDA fault would): checks subprocess isolation."""
import os
import signal

from _base import StaticStep


class Crash(StaticStep):
    def __init__(self, device, crash: bool):
        super().__init__(device)
        self.crash = crash

    def step(self):
        if self.crash:
            os.kill(os.getpid(), signal.SIGKILL)  # PLANTED: kill
        self.out.copy_(self.x @ self.w)
        return self.out


def make(device, crash: bool = True):
    return Crash(device, crash)
