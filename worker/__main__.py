from durable_agents.worker.main import main

main()
