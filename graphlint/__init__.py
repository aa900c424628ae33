"""graphlint: find every reason a PyTorch decode step cannot be captured in a CUDA graph."""
import warnings

__version__ = "0.1.0"

# torch warns "Failed to initialize NumPy" at import where numpy is missing or of another ABI;
# graphlint never uses torch's numpy bridge, so the line is noise in every command that imports
# torch (the runtime harness, its worker processes, the pytest plugin). Only that message.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
