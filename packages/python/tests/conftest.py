import sys
from pathlib import Path

# The helpers beside the tests (forwards, servers, scenarios) import by name.
sys.path.insert(0, str(Path(__file__).parent))
