from apps.common import demo_main
from apps.interpolate import APP

demo_main(APP)
