from apps.camera_pipe import APP
from apps.common import demo_main

demo_main(APP)
