"""A target whose import never ends (checks that --timeout bounds the import)."""
import time

time.sleep(600)  # PLANTED: hang


def make(device):
    raise AssertionError("never reached")
