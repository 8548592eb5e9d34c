# T Maze Agent: placeholder for the RxInfer.jl rendering of the same GNN model.
# Not Python, so `jaxrun run` never picks it up.
println("T Maze Agent (RxInfer.jl rendering): not part of the JAX run")
