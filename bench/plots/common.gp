# Settings every plot shares; each script sets `name` and loads this.
# plots.sh passes dir (the CSV files) and img (where the PNG goes).
if (!exists("dir")) dir = 'bench-results'
if (!exists("img")) img = 'docs/img'

set terminal pngcairo size 1100,640 font 'DejaVu Sans,10' noenhanced
set output img.'/plot-'.name.'.png'
set datafile separator ','
set grid lc rgb '#dddddd'
set key noautotitle
# Room below the panels for the legend and two lines of notes.
set bmargin 12

# The machine and its load during the runs, written by plots.sh.
note = system('cat '.dir.'/plots-'.name.'.note')

# The rows of a CSV file for which the awk condition holds, header
# dropped: sel(file, '$1 == "eachobs"').
sel(f, c) = sprintf("< awk -F, 'NR > 1 && (%s)' %s", c, f)

# One colour per loader, the same in every plot.
c_thr = '#1f4e9e'    # eachobs, consumer helps (THREADED)
c_bg = '#4fa3d9'     # eachobs, background workers (BACKGROUND)
c_pool = '#e07b00'   # hand-written pthread pool
c_tbb = '#2e9e44'    # oneTBB
c_ref = '#888888'    # references: ideal, one thread, bare threads
c_alt = '#c23b3b'    # a third eachobs series
