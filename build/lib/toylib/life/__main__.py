from toylib.life.measure import main
main()
