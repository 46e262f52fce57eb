from apps.common import demo_main
from apps.conv_layer import APP

demo_main(APP)
