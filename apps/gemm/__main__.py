from apps.common import demo_main
from apps.gemm import APP

demo_main(APP)
