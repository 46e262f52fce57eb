from apps.blur import APP
from apps.common import demo_main

demo_main(APP)
