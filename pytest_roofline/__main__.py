import sys

from pytest_roofline.commands import main

sys.exit(main())
