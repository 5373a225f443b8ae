from toylib.maze.training import main
main()
