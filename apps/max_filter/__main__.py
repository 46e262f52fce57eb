from apps.common import demo_main
from apps.max_filter import APP

demo_main(APP)
