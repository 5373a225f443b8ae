from toylib.tictactoe.training import main
main()
