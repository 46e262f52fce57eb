"""Tools for testing pipelines and schedules (they need the `test` extra: Hypothesis).

- corpus: small pipelines with inputs and sizes, built fresh for each example;
- random_pipelines: a Hypothesis strategy drawing random pipelines (DAGs of stencils,
  resamplings and reductions);
- schedule_strategies: random valid schedules for any pipeline, drawn from the placement rules in
  pyhalide.schedule_space and the loop directives' own checks, and crash-guarded realization.
"""
