from apps.common import demo_main
from apps.iir_blur import APP

demo_main(APP)
