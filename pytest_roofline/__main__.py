import sys

from pytest_roofline.cli import main

sys.exit(main())
