import sys
from pathlib import Path

# `app` is the code under test, beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
