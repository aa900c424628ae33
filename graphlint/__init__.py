"""graphlint: find every reason a PyTorch decode step cannot be captured in a CUDA graph."""
__version__ = "0.1.0"
