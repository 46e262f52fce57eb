from apps.common import demo_main
from apps.unsharp import APP

demo_main(APP)
