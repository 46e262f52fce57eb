from apps.common import demo_main
from apps.stencil_chain import APP

demo_main(APP)
