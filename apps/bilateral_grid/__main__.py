from apps.bilateral_grid import APP
from apps.common import demo_main

demo_main(APP)
