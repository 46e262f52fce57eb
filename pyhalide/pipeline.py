"""Pipeline: one or more output Funcs, compiled together and realized."""
class Pipeline: pass
