from apps.common import demo_main
from apps.histogram_equalize import APP

demo_main(APP)
