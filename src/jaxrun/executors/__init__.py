"""Where scripts run: slots (GPU / CPU shares) and the executors that fill them."""
