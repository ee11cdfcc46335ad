"""Training-container glue: run an unmodified training script with the hook SageMaker configured."""
