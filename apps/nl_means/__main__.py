from apps.common import demo_main
from apps.nl_means import APP

demo_main(APP)
