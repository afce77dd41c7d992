"""What is differentiated: loss graphs, penalty graphs, a loss appended to a model."""
