from apps.common import demo_main
from apps.harris import APP

demo_main(APP)
