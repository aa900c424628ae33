"""A step that starts a process and leaves it running (checks the worker's cleanup)."""
import subprocess
import sys

from _base import StaticStep

STARTED: list = []


class Spawner(StaticStep):
    def step(self):
        if not STARTED:
            # PLANTED: process
            STARTED.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
        self.out.copy_(self.x @ self.w)
        return self.out


def make(device):
    return Spawner(device)
