"""Report commands over run directories: plots, Pareto fronts, studies, plans, evaluation."""
