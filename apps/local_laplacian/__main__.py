from apps.common import demo_main
from apps.local_laplacian import APP

demo_main(APP)
