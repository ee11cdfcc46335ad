"""What the training-loop callbacks (Lightning, Hugging Face) share."""
